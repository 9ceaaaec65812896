/**
 * The reference's output for an assert test. Code-A1 corrects a test's stated value with what
 * the reference returns for the test's call (reward.py evaluate: `_r = <call>`, the statement
 * `assert <call> == repr(_r)`, invalid when `(_r) != (<stated>)`), but the sandbox judges an
 * assert test with a verdict and no value. So the Judge runs the reference with a short harness
 * after its module body, as a stdin/stdout program: stdin holds the call and the stated value,
 * and the harness prints, after a marker, the call as Python writes it (ast.unparse), repr of
 * the returned value and whether it equals the stated value, or the type of the exception the
 * call raised. Both are evaluated in the module's own globals, as the release's script does.
 */
import { z } from 'zod';
import type { StdioTest } from '../core/problem.js';
import { canonicalJson } from '../core/canonical-json.js';

const MARKER = '__crucible_reference_probe__';
/** A repr longer than this is not kept (a recorded output is capped at 64 KiB). */
const MAX_REPR = 60_000;

const HARNESS = `

def ${MARKER}():
    import ast as _ast, json as _json, sys as _sys
    _q = _json.loads(_sys.stdin.read())
    _out = {}
    try:
        _out["call"] = _ast.unparse(_ast.parse(_q["call"], mode="eval").body)
    except Exception:
        pass
    try:
        _r = eval(_q["call"], globals())
    except BaseException as _e:
        _out["raised"] = type(_e).__name__
    else:
        _repr = repr(_r)
        if len(_repr) > ${MAX_REPR}:
            _out["tooLong"] = True
        else:
            _out["repr"] = _repr
            try:
                _out["matches"] = not bool((_r) != (eval(_q["expected"], globals())))
            except BaseException:
                _out["matches"] = False
    _sys.stdout.write("\\n${MARKER}" + _json.dumps(_out) + "\\n")


${MARKER}()
`;

/** The reference program followed by the harness. */
export function referenceProbeProgram(reference: string): string {
  return `${reference.replace(/\s+$/, '')}\n${HARNESS}`;
}

/** The probe of one assert test: its call and stated value on stdin, no expected output. */
export function referenceProbeTest(call: string, expected: string): StdioTest {
  return { style: 'stdio', input: canonicalJson({ call, expected }), output: null };
}

const ProbeOutput = z.union([
  z.object({ call: z.string().optional(), repr: z.string(), matches: z.boolean() }).strict(),
  z.object({ call: z.string().optional(), raised: z.string() }).strict(),
  z.object({ call: z.string().optional(), tooLong: z.literal(true) }).strict(),
]);
export type ReferenceProbe =
  { kind: 'returned'; call: string | null; repr: string; matchesStated: boolean } | { kind: 'raised'; exceptionType: string } | { kind: 'unreadable' };

/** What the harness printed last (anything the call printed comes before it). */
export function readReferenceProbe(output: string): ReferenceProbe {
  const at = output.lastIndexOf(`\n${MARKER}`);
  if (at < 0) return { kind: 'unreadable' };
  const line = output.slice(at + MARKER.length + 1).split('\n')[0]!;
  let parsed;
  try {
    parsed = ProbeOutput.safeParse(JSON.parse(line));
  } catch {
    return { kind: 'unreadable' };
  }
  if (!parsed.success) return { kind: 'unreadable' };
  const d = parsed.data;
  if ('raised' in d) return { kind: 'raised', exceptionType: d.raised };
  if ('tooLong' in d) return { kind: 'unreadable' };
  return { kind: 'returned', call: d.call ?? null, repr: d.repr, matchesStated: d.matches };
}
