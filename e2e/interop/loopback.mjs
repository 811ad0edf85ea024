// Preloaded (node --import) by e2e/interop_test.go into the unmodified npm
// servers it starts: they call listen(PORT) with no host, which would bind
// every interface. This binds them to 127.0.0.1 instead, so the tests
// listen and talk on loopback only.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const rest = args.slice(1).filter((a) => typeof a === "function");
    return listen.call(this, { port, host: "127.0.0.1" }, ...rest);
  }
  return listen.apply(this, args);
};
