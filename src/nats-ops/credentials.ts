/**
 * The credentials a cluster's operator makes: one nkey user per role, written to files readable
 * by their owner only, and the server config's accounts block naming their public keys.
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { nkeys } from '@nats-io/transport-node';
import { LogCredentialsError } from '../events/errors.js';
import {
  credentialsFile,
  NATS_ROLES,
  publicKeyOf,
  readCredentials,
  rolePermissions,
  type NatsCredentials,
  type NatsRole,
} from '../events/jetstream/nats-roles.js';

export function newCredentials(role: NatsRole, ca: string | null): NatsCredentials {
  const seed = new TextDecoder().decode(nkeys.createUser().getSeed());
  return { format: 'crucible-nats-credentials/1', role, seed, ca };
}

export function writeCredentials(file: string, creds: NatsCredentials): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(creds, null, 2)}\n`, { mode: 0o600 });
  // writeFileSync's mode applies only to a new file.
  chmodSync(file, 0o600);
}

/** Keeps the credentials already in `dir` (so files handed out before a restart stay valid) and
 * makes the missing ones; every role gets one. */
export function ensureCredentials(dir: string, ca: string | null): Map<NatsRole, NatsCredentials> {
  const out = new Map<NatsRole, NatsCredentials>();
  for (const role of NATS_ROLES) {
    const file = credentialsFile(dir, role);
    let creds: NatsCredentials | null = null;
    if (existsSync(file)) {
      creds = readCredentials(file);
      if (creds.role !== role) throw new LogCredentialsError(file, `holds role ${creds.role}, expected ${role}`);
      if (creds.ca !== ca) {
        creds = { ...creds, ca };
        writeCredentials(file, creds);
      }
    } else {
      creds = newCredentials(role, ca);
      writeCredentials(file, creds);
    }
    out.set(role, creds);
  }
  return out;
}

/** The `accounts` block of a server config: one account with JetStream, one nkey user per role. */
export function accountsConfig(creds: ReadonlyMap<NatsRole, NatsCredentials>): string {
  const users = [...creds.entries()].map(([role, c]) => {
    const perms = rolePermissions(role);
    const permissions = perms === null ? '' : `, permissions: ${JSON.stringify(perms)}`;
    return `    # ${role}\n    { nkey: ${publicKeyOf(c)}${permissions} }`;
  });
  return ['accounts {', '  CRUCIBLE {', '    jetstream: enabled', '    users: [', users.join('\n'), '    ]', '  }', '}'].join('\n');
}
