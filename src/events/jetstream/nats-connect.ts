/**
 * How a client connects to a crucible cluster with a role's credentials: the nkey signs the
 * server's nonce, the CA (when the cluster runs TLS) verifies the server, and replies come to the
 * role's own inbox prefix (the only inboxes its permissions let it read).
 */
import { nkeyAuthenticator, type ConnectionOptions } from '@nats-io/transport-node';
import { inboxPrefixOf, type NatsCredentials } from './nats-roles.js';
import { LogAuthenticationError, LogPermissionError, LogUnavailableError } from '../errors.js';

export function credentialOptions(creds: NatsCredentials | undefined): Partial<ConnectionOptions> {
  if (!creds) return {};
  return {
    authenticator: nkeyAuthenticator(new TextEncoder().encode(creds.seed)),
    ...(creds.role === 'admin' ? {} : { inboxPrefix: inboxPrefixOf(creds.role) }),
    ...(creds.ca !== null ? { tls: { ca: creds.ca } } : {}),
  };
}

/** The clear error for a connection that failed: refused credentials, an untrusted certificate,
 * or nobody answering. */
export function connectFailure(location: string, err: unknown, creds: NatsCredentials | undefined): Error {
  const reason = (err as Error)?.message ?? String(err);
  const name = (err as Error)?.name ?? '';
  if (name === 'AuthorizationError' || /authorization violation|authentication/i.test(reason)) {
    return new LogAuthenticationError(
      location,
      creds
        ? `it does not accept the ${creds.role} credentials (${reason}); were they written by \`crucible nats up\` for this cluster?`
        : `it requires credentials (${reason}): pass --creds DIR/<role>.creds.json`,
    );
  }
  if (/certificate|self[- ]signed|tls|ssl/i.test(reason)) {
    return new LogAuthenticationError(
      location,
      `TLS failed (${reason})${creds?.ca ? '' : '; the cluster runs TLS: use credentials written by `crucible nats up --tls`, which carry its CA'}`,
    );
  }
  return new LogUnavailableError(location, `${reason} (is nats-server running? \`crucible nats up --dir DIR\` starts one)`);
}

/** The server's refusal of something this role may not do, found in the client's error chain
 * (a refused publish arrives as a failed request caused by a permission violation). */
export function permissionFailure(err: unknown, role: string, operation: string): LogPermissionError | null {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as Error).cause, depth++) {
    if ((e as Error).name === 'PermissionViolationError') {
      const v = e as Error & { subject?: string; operation?: string };
      return new LogPermissionError(role, operation, v.subject ?? '(unknown subject)', v.message);
    }
  }
  return null;
}

/** A connection whose credentials say one role and hold another's key: the server refuses it
 * the inbox of the role they say (replies to a role go to that role's inbox prefix alone). */
export function inboxRefusal(err: unknown, location: string, creds: NatsCredentials | undefined): LogAuthenticationError | null {
  if (!creds) return null;
  // The admin keeps the client's default prefix.
  const prefix = creds.role === 'admin' ? '_INBOX' : inboxPrefixOf(creds.role);
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as Error).cause, depth++) {
    const v = e as Error & { subject?: string; operation?: string };
    if (v.name === 'PermissionViolationError' && v.operation === 'subscription' && v.subject?.startsWith(`${prefix}.`)) {
      return new LogAuthenticationError(
        location,
        `it does not let these credentials read the replies of role ${creds.role} (${v.message}): the key in them is not the ${creds.role}'s`,
      );
    }
  }
  return null;
}
