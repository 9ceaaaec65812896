/**
 * Certificates for a local cluster, made with `openssl`: a CA, and one server certificate (for
 * clients and for routes between the servers) naming every address the servers listen on. The
 * CA's key stays in the directory (mode 0600); clients get the CA certificate in their
 * credentials file.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { NatsServerError } from './nats-server-error.js';

export interface NatsTlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** PEM of the CA certificate. */
  ca: string;
}

function openssl(args: string[], cwd: string): void {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw new NatsServerError(`openssl could not run (${r.error.message}); install it (Debian: apt-get install openssl) or start without --tls`);
  if (r.status !== 0) throw new NatsServerError(`openssl ${args[0]} failed: ${(r.stderr ?? '').trim().split('\n').slice(-2).join(' | ')}`);
}

/**
 * Makes (or keeps) the CA in `dir`, and makes a server certificate for `addresses` (IPs) plus
 * localhost. The CA is kept across calls so credentials handed out earlier stay valid; the server
 * certificate is made again when the addresses change.
 */
export function ensureTls(dir: string, addresses: readonly string[]): NatsTlsFiles {
  const tlsDir = path.join(dir, 'tls');
  mkdirSync(tlsDir, { recursive: true });
  const caFile = path.join(tlsDir, 'ca.pem');
  const caKey = path.join(tlsDir, 'ca.key');
  const certFile = path.join(tlsDir, 'server.pem');
  const keyFile = path.join(tlsDir, 'server.key');
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  if (!existsSync(caFile) || !existsSync(caKey)) {
    openssl(
      [
        'req',
        '-x509',
        ...ec,
        '-keyout',
        caKey,
        '-out',
        caFile,
        '-days',
        '3650',
        '-subj',
        '/CN=crucible nats CA',
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      tlsDir,
    );
  }
  const ips = [...new Set(['127.0.0.1', ...addresses])];
  const san = `subjectAltName=DNS:localhost,${ips.map((a) => `IP:${a}`).join(',')}`;
  const sanFile = path.join(tlsDir, 'server.san');
  const previous = existsSync(sanFile) ? readFileSync(sanFile, 'utf8') : '';
  if (previous !== san || !existsSync(certFile) || !existsSync(keyFile)) {
    const ext = path.join(tlsDir, 'server.ext');
    // The same certificate serves clients and routes, where each server is also a client.
    writeFileSync(ext, `${san}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n`);
    const csr = path.join(tlsDir, 'server.csr');
    openssl(['req', ...ec, '-keyout', keyFile, '-out', csr, '-subj', '/CN=crucible nats server'], tlsDir);
    openssl(['x509', '-req', '-in', csr, '-CA', caFile, '-CAkey', caKey, '-CAcreateserial', '-out', certFile, '-days', '825', '-extfile', ext], tlsDir);
    writeFileSync(sanFile, san);
  }
  chmodSync(caKey, 0o600);
  chmodSync(keyFile, 0o600);
  return { caFile, certFile, keyFile, ca: readFileSync(caFile, 'utf8') };
}

/** The `tls { }` block of a server config (clients, or routes when `verify`). */
export function tlsBlock(files: NatsTlsFiles, verify: boolean): string {
  return `tls { cert_file: ${JSON.stringify(files.certFile)}, key_file: ${JSON.stringify(files.keyFile)}, ca_file: ${JSON.stringify(files.caFile)}, verify: ${verify}, timeout: 5 }`;
}
