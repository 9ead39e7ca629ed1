/**
 * A loopback HTTP proxy for tests. Each request head is recorded (`heads`); without `auth` (when one is required)
 * the answer is 407; `CONNECT <authority>` is tunnelled to 127.0.0.1:<port> when `tunnel` matches the request line
 * (its first group is the port), else refused 403; an absolute-form request is answered by the proxy itself with
 * what it received (`proxied <request line> host=<Host>`).
 */
import { connect, createServer, type AddressInfo, type Socket } from "node:net";

export interface LoopbackProxy {
  port: number;
  /** Each request's head, as received (without its blank line). */
  heads: string[];
  close(): Promise<void>;
}

export async function loopbackProxy(o: { auth: string | null; tunnel: RegExp }): Promise<LoopbackProxy> {
  const heads: string[] = [];
  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s)).on("error", () => undefined);
  };
  const server = createServer((client) => {
    track(client);
    let head = "";
    const onData = (d: Buffer): void => {
      head += d.toString("latin1");
      const end = head.indexOf("\r\n\r\n");
      if (end === -1) return;
      client.off("data", onData);
      heads.push(head.slice(0, end));
      if (o.auth !== null && !head.toLowerCase().includes(`\r\nproxy-authorization: ${o.auth.toLowerCase()}\r\n`)) {
        return void client.end("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\nContent-Length: 0\r\n\r\n");
      }
      if (head.startsWith("CONNECT ")) {
        const m = o.tunnel.exec(head.slice(0, head.indexOf("\r\n")));
        if (m === null) return void client.end("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        const upstream = connect({ host: "127.0.0.1", port: Number(m[1]) }, () => {
          client.write("HTTP/1.1 200 Connection established\r\n\r\n");
          client.pipe(upstream).pipe(client);
        });
        track(upstream);
        upstream.on("error", () => client.destroy());
        client.on("error", () => upstream.destroy());
        return;
      }
      const body = `proxied ${head.split("\r\n")[0]} host=${/\r\nhost: ([^\r]*)/i.exec(head)?.[1] ?? ""}`;
      client.end(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    };
    client.on("data", onData);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    heads,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
