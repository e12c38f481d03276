import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now, for a server the caller starts next (an embedded PostgreSQL). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no free port on 127.0.0.1'))));
    });
  });
}
