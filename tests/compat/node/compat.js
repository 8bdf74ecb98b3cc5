// Drives throttlekit-server with ioredis. Usage:
//   node compat.js <ioredis|ioredis5> <port> <scenario>
// Prints one JSON document with what the client saw; the Go test in
// tests/compat asserts on it.
"use strict";
const [, , lib, port, scenario] = process.argv;
const Redis = require(lib);

function describeError(e) {
  return e ? { name: e.name, message: e.message } : null;
}

async function main() {
  const r = new Redis({ port: Number(port), host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0 });
  await r.connect();
  const out = { lib, scenario };
  try {
    switch (scenario) {
      case "multi": {
        out.exec = await r
          .multi()
          .call("THROTTLE.CHECK", "io:a", "10", "1m")
          .call("THROTTLE.CHECK", "io:b", "10", "1m")
          .exec();
        break;
      }
      case "abort": {
        try {
          out.exec = await r
            .multi()
            .call("THROTTLE.CHECK", "io:c", "10", "1m")
            .call("THROTTLE.CHECK", "io:c")
            .exec();
        } catch (e) {
          out.error = describeError(e);
        }
        out.peek = await r.call("THROTTLE.PEEK", "io:c", "10", "1m");
        break;
      }
      case "info": {
        out.info = await r.info();
        break;
      }
      default:
        throw new Error("unknown scenario " + scenario);
    }
  } finally {
    r.disconnect();
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ fatal: describeError(e) }));
  process.exit(1);
});
