import { connect, type Socket } from 'node:net';

/** What a node-postgres client knows of its server and backend once it has connected. */
export interface BackendAddress {
  readonly host?: string;
  readonly port?: number;
  /** From the server's BackendKeyData at startup; null before the client has connected. */
  readonly processID?: number | null;
  readonly secretKey?: number | null;
}

/** PostgreSQL's CancelRequest code: 1234 in the high 16 bits, 5678 in the low. */
const CANCEL_REQUEST_CODE = 80877102;
/** A cancel that has not gone out by then never will; the socket must not linger. */
const GIVE_UP_MS = 5_000;

/**
 * Asks the server to cancel the statement a backend is running, as psql's Ctrl-C does: a
 * CancelRequest on a new connection, naming the backend by process id and secret key. Ending a
 * connection is not enough for that: a backend reads its socket only between statements, so one
 * waiting on a lock would keep waiting, and keep its own locks, with no client left to care. The
 * secret key makes it safe: it matches only that backend, never one that later reuses its pid.
 *
 * Best effort, and silent: nothing is sent when the address is incomplete (a custom stream, say),
 * and a refused or lost request changes nothing. Behind a connection pooler the request reaches
 * the pooler, which may no longer know the client; then nothing happens.
 */
export function sendCancelRequest(backend: BackendAddress): void {
  const { host, port, processID, secretKey } = backend;
  if (!host || !port || typeof processID !== 'number' || typeof secretKey !== 'number') return;
  const request = Buffer.alloc(16);
  request.writeInt32BE(16, 0);
  request.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  request.writeInt32BE(processID, 8);
  request.writeInt32BE(secretKey, 12);
  // node-postgres's own convention: a host that is a path names a directory holding the socket.
  const socket: Socket = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host);
  socket.unref();
  socket.setTimeout(GIVE_UP_MS, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  socket.once('connect', () => socket.end(request));
}
