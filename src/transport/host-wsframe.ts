/**
 * Server-to-client WebSocket text frame encoding (RFC 6455 §5.2: FIN, opcode 0x1, no mask),
 * so one message can be framed once and written to many sockets. Knows nothing of sessions.
 */
export function wsTextFrame(text: string): Buffer {
  const payload = Buffer.from(text, "utf8");
  const n = payload.length;
  let header: Buffer;
  if (n < 126) {
    header = Buffer.allocUnsafe(2);
    header[1] = n;
  } else if (n < 65536) {
    header = Buffer.allocUnsafe(4);
    header[1] = 126;
    header.writeUInt16BE(n, 2);
  } else {
    header = Buffer.allocUnsafe(10);
    header[1] = 127;
    header.writeUInt32BE(Math.floor(n / 2 ** 32), 2);
    header.writeUInt32BE(n >>> 0, 6);
  }
  header[0] = 0x81;
  return Buffer.concat([header, payload], header.length + n);
}
