/**
 * The `data` column of a SQLite log row: the event's JSON text, or (format 2) that text
 * deflated when that makes it a good deal shorter. Text and bytes are told apart by SQLite's
 * own storage class (TEXT or BLOB), so rows written before compression read as they are.
 * Packed events are mostly columns of base64 hashes and counted ids: deflate takes about a
 * third off them (base64 carries 6 bits a character; ids repeat their prefixes).
 */
import { deflateRawSync, inflateRawSync, constants } from 'node:zlib';

/** Shorter texts are stored as they are: deflating them saves little and costs a call each. */
const MIN_DEFLATED = 512;

/** What the data column stores for an event's JSON text. */
export function storedData(text: string): string | Buffer {
  if (text.length < MIN_DEFLATED) return text;
  const bytes = deflateRawSync(text, { level: constants.Z_BEST_SPEED });
  // Kept only when it saves a tenth: a row of incompressible text stays readable as text.
  return bytes.length * 10 < Buffer.byteLength(text) * 9 ? bytes : text;
}

/** The JSON text a data column holds; throws when deflated bytes do not inflate. */
export function dataText(stored: string | Uint8Array): string {
  if (typeof stored === 'string') return stored;
  return inflateRawSync(stored).toString('utf8');
}
