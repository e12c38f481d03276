import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { sendCancelRequest } from './backend-cancel-request.js';

describe('sendCancelRequest', () => {
  it('sends one CancelRequest naming the backend by process id and secret key, then closes', async () => {
    const received = new Promise<Buffer>((resolve) => {
      const server = createServer((socket) => {
        const chunks: Buffer[] = [];
        socket.on('data', (chunk) => chunks.push(chunk));
        socket.on('end', () => {
          server.close();
          resolve(Buffer.concat(chunks));
        });
      });
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        // A secret key past 2^31 arrives from node-postgres as a negative 32-bit integer.
        sendCancelRequest({ host: '127.0.0.1', port, processID: 4242, secretKey: -123456789 });
      });
    });
    const request = await received;
    expect(request.length).toBe(16);
    expect(request.readInt32BE(0)).toBe(16);
    expect(request.readInt32BE(4)).toBe(80877102);
    expect(request.readInt32BE(8)).toBe(4242);
    expect(request.readInt32BE(12)).toBe(-123456789);
  });
});
