/**
 * The `data` column of a SQLite log row: the event's JSON text, or (format 2) that text
 * deflated when that makes it a good deal shorter. Text and bytes are told apart by SQLite's
 * own storage class (TEXT or BLOB), so rows written before compression read as they are.
 * Packed events are mostly columns of base64 hashes and counted ids: deflate takes about a
 * third off them (base64 carries 6 bits a character; ids repeat their prefixes).
 *
 * A deflated row is a tag byte, then the deflated text. Tag 1: deflated with DICTIONARY_1 as
 * the preset dictionary (the catalog's field names and markers), which a row of a few hundred
 * characters (a suite's TestsSampled) cannot learn from itself. The dictionary of a tag never
 * changes: a new one gets a new tag, and rows keep the tag they were written with.
 */
import { deflateRawSync, inflateRawSync, constants } from 'node:zlib';

/** Shorter texts are stored as they are: deflating them saves little and costs a call each. */
const MIN_DEFLATED = 160;

const DICTIONARY_1 = Buffer.from(
  [
    '"config":{"name":"","method":"code-a1","seed":,"rounds":,"dir":"","log":{"backend":"sqlite","synchronous":"full"},"dataset":{"format":"demo"}',
    '"checkpoint":null,"paramsHash":null,"metrics":{"samples":,"fromVersion":,"toVersion":,"batchId":"","batchHash":"","size":,"sampleIds":[',
    '"heldOut":{"programs":,"passed":},"kill":{"targets":,"suites":,"killed":},"tests":{"sampled":,"wellFormed":,"valid":},"mistakeBook":{"size":},"rewards":{"code":,"test":}',
    '"groupSize":8,"whiteBox":false,"codeVersion":0,"testVersion":0,"problemHash":"',
    '"rewardFn":"code-a1/v1","items":{"~t":["sampleId","reward","advantage","components"],"~n":8,"~c":[{"~s":["',
    '"changes":{"~t":["testKey","testHash","delta","count","cause"],"~n":,"~c":[[{\\"input\\":\\"\\n\\",\\"output\\":\\"\\n\\",\\"style\\":\\"stdio\\"}","fail","pass","decay","cap","blacklist"',
    '"tests":{"~t":["testId","testHash","valid","reason","status","oracleHash"],"~n":,"~c":[{"~s":["","ok","malformed","no-expected","duplicate","reference-raises","corrected","invalid","unknown"',
    '"verdicts":"AAAAWWWW","timeMs":[],"memoryKb":[],"outputs":{},"exceptions":{},"cached":[],"isolated":true,"load":"unknown","load":"ran"',
    '{"requestId":"","programHash":"","pairs":{"~a":[0,1,',
    '"purpose":"oracle","purpose":"reward","purpose":"heldout","purpose":"kill","programs":[{"programId":"reference","programHash":""}],"programs":{"~t":["programId","programHash"],"~n":8,"~c":[{"~s":["',
    '"tests":{"~t":["testId","testHash"],"~n":,"~c":[{"~s":["',
    '"reused":[],"pairs":{"~a2":[[0,1,',
    '"solutionId":"","programHash":"","policy":{"role":"code","name":"","version":0},"responseHash":null}',
    '"suiteId":"","targetSolutionId":"","policy":{"role":"test","name":"","version":0},',
    '"sampling":{"seed":,"index":0,"temperature":1,"candidateId":null,"contextKey":null},"responseHash":"","nonprintableRatio":0,',
    '"tests":{"~t":["testId","testHash","wellFormed","reason"],"~n":8,"~c":[{"~s":["',
    '{"~h":"',
    '"]},{"~k":true,"~n":8},{"~k":null,"~n":8}]}}',
    '{"round":1,"problemId":"',
  ].join(''),
);

const TAG_DICTIONARY_1 = 1;

/** What the data column stores for an event's JSON text. */
export function storedData(text: string): string | Buffer {
  if (text.length < MIN_DEFLATED) return text;
  const bytes = deflateRawSync(text, { level: constants.Z_BEST_SPEED, dictionary: DICTIONARY_1 });
  // Kept only when it saves a tenth: a row of incompressible text stays readable as text.
  if ((bytes.length + 1) * 10 >= Buffer.byteLength(text) * 9) return text;
  const out = Buffer.allocUnsafe(bytes.length + 1);
  out[0] = TAG_DICTIONARY_1;
  bytes.copy(out, 1);
  return out;
}

/** The JSON text a data column holds; throws when deflated bytes do not inflate. */
export function dataText(stored: string | Uint8Array): string {
  return typeof stored === 'string' ? stored : dataBytes(stored).toString('utf8');
}

/** The UTF-8 bytes of the JSON text a deflated data column holds (a checksum reads them as they
 * are, before they become a string); throws when they do not inflate. */
export function dataBytes(stored: Uint8Array): Buffer {
  if (stored[0] !== TAG_DICTIONARY_1) throw new Error(`stored data starts with tag ${stored[0]}, which this crucible does not know`);
  return inflateRawSync(stored.subarray(1), { dictionary: DICTIONARY_1 });
}
