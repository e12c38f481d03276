import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy the test steers, standing where a Kubernetes Service or a virtual IP would:
 * it can be pointed at another server, and it can stop moving bytes as a network partition does
 * (nothing closed, nothing reset, packets just stop arriving) and start again.
 */
export interface TcpProxy {
  /** The loopback port clients connect to. */
  readonly port: number;
  /** The server port that new connections go to. */
  readonly target: number;
  /** `url` (a postgres:// URL) with its host and port replaced by the proxy's. */
  urlFor(url: string): string;
  /**
   * New connections go to `port` from now on. Open ones stay with the server they have, as
   * established connections do when a Service's endpoints or a DNS name change.
   */
  switchTarget(port: number): void;
  /** Closes every open connection, both sides (as when the server behind them is gone). */
  dropConnections(): void;
  /**
   * Stops moving bytes both ways, without closing or resetting anything: what each side sends
   * is held, and new connections are accepted but not passed on, until `heal()`.
   */
  cut(): void;
  /** Passes on everything held, in order, and moves bytes again. */
  heal(): void;
  /** Open connections, to `targetPort` only when given. */
  openConnections(targetPort?: number): number;
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

interface Link {
  client: Socket;
  upstream: Socket | null;
  target: number;
  /** Bytes read while cut, per direction, passed on at heal. */
  heldUp: Buffer[];
  heldDown: Buffer[];
}

/** Starts a proxy on 127.0.0.1 (a free port) in front of 127.0.0.1:`targetPort`. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  let cut = false;
  const links = new Set<Link>();

  const closeLink = (link: Link) => {
    if (!links.delete(link)) return;
    link.client.destroy();
    link.upstream?.destroy();
  };

  const connectUpstream = (link: Link) => {
    const upstream = connect(link.target, '127.0.0.1');
    link.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('data', (chunk: Buffer) => forward(link, chunk, 'down'));
    // A server that is gone (refused, reset, ended) ends the client's connection too.
    upstream.on('error', () => closeLink(link));
    upstream.on('close', () => closeLink(link));
    for (const chunk of link.heldUp.splice(0)) upstream.write(chunk);
    link.client.resume();
  };

  /** Passes a chunk on, or holds it while cut; pauses the reading side while the other is full. */
  const forward = (link: Link, chunk: Buffer, direction: 'up' | 'down') => {
    const [from, to, held] = direction === 'up' ? [link.client, link.upstream, link.heldUp] : [link.upstream!, link.client, link.heldDown];
    if (cut || !to) {
      held.push(chunk);
      from.pause();
      return;
    }
    if (!to.write(chunk)) {
      from.pause();
      to.once('drain', () => {
        if (!cut) from.resume();
      });
    }
  };

  const server: Server = createServer((client) => {
    const link: Link = { client, upstream: null, target, heldUp: [], heldDown: [] };
    links.add(link);
    client.setNoDelay(true);
    client.on('data', (chunk: Buffer) => forward(link, chunk, 'up'));
    client.on('error', () => closeLink(link));
    client.on('close', () => closeLink(link));
    if (cut) client.pause();
    else connectUpstream(link);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;

  return {
    port,
    get target() {
      return target;
    },
    urlFor(url: string) {
      const parsed = new URL(url);
      parsed.hostname = '127.0.0.1';
      parsed.port = String(port);
      return parsed.toString();
    },
    switchTarget(next: number) {
      target = next;
    },
    dropConnections() {
      for (const link of [...links]) closeLink(link);
    },
    cut() {
      cut = true;
      for (const link of links) {
        link.client.pause();
        link.upstream?.pause();
      }
    },
    heal() {
      cut = false;
      for (const link of [...links]) {
        if (!link.upstream) {
          connectUpstream(link);
          continue;
        }
        for (const chunk of link.heldUp.splice(0)) link.upstream.write(chunk);
        for (const chunk of link.heldDown.splice(0)) link.client.write(chunk);
        link.client.resume();
        link.upstream.resume();
      }
    },
    openConnections(targetPort?: number) {
      return [...links].filter((link) => targetPort === undefined || link.target === targetPort).length;
    },
    async close() {
      for (const link of [...links]) closeLink(link);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
