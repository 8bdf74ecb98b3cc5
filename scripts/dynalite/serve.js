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

// dynalite rethrows a request's 'error' event from its handler, so a client
// that goes away in the middle of a request (the crash tests SIGKILL the
// server under load) would take the whole emulator down with it. DynamoDB
// keeps serving its other clients; so does this: an aborted or reset client
// request is logged and dropped, and any other error still ends the process.
process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.code === 'ECONNABORTED' || err.message === 'aborted')) {
    process.stderr.write('dynalite: client request ended early (' + (err.code || err.message) + ')\n')
    return
  }
  process.stderr.write((err && err.stack ? err.stack : String(err)) + '\n')
  process.exit(1)
})
