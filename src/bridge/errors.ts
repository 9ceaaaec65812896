/**
 * Errors of the gpu-bridge client. Each says what failed and where; `retryable` tells a caller
 * whether sending the same request again (with the same idem key) can succeed.
 */

export class BridgeError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The bridge answered `ok: false`: unknown_op, version_mismatch, hash_mismatch, too_large, ... */
export class BridgeRemoteError extends BridgeError {
  constructor(
    readonly op: string,
    readonly code: string,
    readonly remoteMessage: string,
    retryable: boolean,
  ) {
    super(`gpu-bridge ${op} failed (${code}): ${remoteMessage}`, retryable);
  }
}

/** The bridge wrote something that is not a protocol line; the stream cannot be trusted, so the
 * client closes it and fails every pending call. */
export class BridgeProtocolError extends BridgeError {
  constructor(message: string) {
    super(message, false);
  }
}

/** The request line is larger than the bridge accepts; it was not sent. */
export class BridgeRequestTooLargeError extends BridgeError {
  constructor(
    readonly op: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`gpu-bridge ${op} request is ${bytes} bytes, over the limit of ${limit}; send batches by reference (a JSONL file and its sha256)`, false);
  }
}

export class BridgeTimeoutError extends BridgeError {
  constructor(
    readonly op: string,
    readonly ms: number,
  ) {
    // Retryable: with an idem key (train_step: its batch id) a retry cannot apply twice.
    super(`gpu-bridge ${op} got no reply within ${ms} ms`, true);
  }
}

/** The bridge process is gone (exited, killed, or never started). */
export class BridgeDeadError extends BridgeError {
  constructor(
    readonly detail: string,
    readonly stderrTail: string,
  ) {
    super(`gpu-bridge is dead: ${detail}${stderrTail ? `; its stderr ends with:\n${stderrTail}` : ''}`, true);
  }
}

/** A published checkpoint cannot be put together from the blob store: a file's blob is missing
 * or its bytes do not match the manifest, or the manifest itself is unreadable. Not retryable:
 * the same blobs give the same answer. */
export class CheckpointBlobError extends Error {
  constructor(
    readonly label: string,
    readonly file: string | null,
    detail: string,
  ) {
    super(`checkpoint ${label}${file ? `, file ${file}` : ''}: ${detail}`);
    this.name = 'CheckpointBlobError';
  }
}
