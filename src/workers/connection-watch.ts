/**
 * Says which server a worker talks to, and when it loses it and reconnects to another: the
 * lines that show a worker going on through another node of the cluster.
 */
import type { NatsConnection } from '@nats-io/transport-node';

/** Watches until the connection closes. `server` is host:port as the client dialled it. */
export function watchConnection(nc: NatsConnection, say: (line: string) => void): void {
  say(`connected to ${nc.getServer()}`);
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') say(`lost its server ${s.server}`);
      else if (s.type === 'staleConnection') say('its server stopped answering pings');
      else if (s.type === 'reconnect') say(`reconnected to ${s.server}`);
    }
  })().catch(() => undefined);
}
