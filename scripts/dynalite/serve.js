// Serves dynalite (the module directory given as the first argument) on
// 127.0.0.1 at a port the kernel picks when it binds, then prints the
// endpoint as the first line of stdout. Binding first and telling second
// leaves no moment in which another process could take the port, as a port
// chosen ahead and bound later could be.
'use strict'

const dynalite = require(process.argv[2])
const server = dynalite({})
server.listen(0, '127.0.0.1', () => {
  process.stdout.write('http://127.0.0.1:' + server.address().port + '\n')
})
