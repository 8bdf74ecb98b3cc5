"""Drives throttlekit-server with redis-py. Usage: compat.py <port> <scenario>.

Prints one JSON document with what the client saw; the Go test in
tests/compat asserts on it.
"""
import json
import sys

import redis


def main():
    port, scenario = int(sys.argv[1]), sys.argv[2]
    r = redis.Redis(host="127.0.0.1", port=port)
    out = {"lib": "redis-py " + redis.__version__, "scenario": scenario}
    if scenario == "pipeline":
        p = r.pipeline()  # transaction=True: MULTI ... EXEC
        p.execute_command("THROTTLE.CHECK", "py:a", 10, "1m")
        p.execute_command("THROTTLE.CHECK", "py:b", 10, "1m")
        out["exec"] = p.execute()
    elif scenario == "abort":
        p = r.pipeline()
        p.execute_command("THROTTLE.CHECK", "py:c", 10, "1m")
        p.execute_command("THROTTLE.CHECK", "py:c")
        try:
            out["exec"] = p.execute()
        except redis.exceptions.RedisError as e:
            out["error"] = {"name": type(e).__name__, "message": str(e)}
        out["peek"] = r.execute_command("THROTTLE.PEEK", "py:c", 10, "1m")
    elif scenario == "watch":
        other = redis.Redis(host="127.0.0.1", port=port)
        r.execute_command("THROTTLE.CHECK", "py:w", 10, "1m")
        with r.pipeline() as p:
            p.watch("py:w")
            other.execute_command("THROTTLE.CHECK", "py:w", 10, "1m")
            p.multi()
            p.execute_command("THROTTLE.CHECK", "py:w", 10, "1m")
            try:
                out["exec"] = p.execute()
            except redis.exceptions.WatchError as e:
                out["error"] = {"name": type(e).__name__, "message": str(e)}
        out["peek"] = r.execute_command("THROTTLE.PEEK", "py:w", 10, "1m")
    elif scenario == "scan":
        for i in range(25):
            r.execute_command("THROTTLE.CHECK", "user:%d" % i, 10, "1h")
        r.execute_command("THROTTLE.CHECK", "other", 10, "1h")
        out["keys"] = sorted(k.decode() for k in r.scan_iter(match="user:*", count=7))
        out["ttl"] = r.ttl("user:1")
        out["type"] = r.type("user:1").decode()
        out["exists"] = r.exists("user:1", "nosuch")
        out["deleted"] = r.delete("user:1", "nosuch")
    else:
        raise SystemExit("unknown scenario " + scenario)
    print(json.dumps(out, default=lambda b: b.decode() if isinstance(b, bytes) else str(b)))


if __name__ == "__main__":
    main()
