/**
 * Versioned prompt templates, per method and role. A template's id and version are recorded with
 * every sample, with the hash of the exact text sent, so a changed wording is a new version and
 * an old run still says what its model saw. Change a template's text only by adding a version.
 */
import type { TestStyle } from '../../core/problem.js';
import type { Role } from '../../core/roles.js';
import { PromptTemplateError } from './errors.js';

export interface PromptFields {
  statement: string;
  style: TestStyle;
  entryPoint?: string | undefined;
  starterCode?: string | undefined;
  suiteSize: number;
  /** The program under test (white-box test prompts only). */
  program?: string | undefined;
}

export interface PromptTemplate {
  id: string;
  version: number;
  role: Role;
  /** Whether the prompt shows the program under test. */
  whiteBox: boolean;
  render(f: PromptFields): string;
}

export interface RenderedPrompt {
  templateId: string;
  templateVersion: number;
  text: string;
}

function interfaceLine(f: PromptFields): string {
  if (f.style === 'stdio') return 'The program reads standard input and writes standard output.';
  return `The program defines \`${f.entryPoint ?? '(unnamed)'}\`.`;
}

/** How a test is written, per style; `withExpected: false` asks for inputs only. */
function testFormat(f: PromptFields, withExpected: boolean): string {
  const fn = (f.entryPoint ?? 'f').split('.').pop();
  if (f.style === 'stdio') {
    return withExpected
      ? 'Write each test as a block labelled Input followed by a block labelled Output (the exact expected standard output):\nInput:\n```\n<stdin>\n```\nOutput:\n```\n<stdout>\n```'
      : 'Write each test as a block labelled Input (no output is needed):\nInput:\n```\n<stdin>\n```';
  }
  if (f.style === 'call') {
    return withExpected
      ? `Write each test on its own line as \`assert ${fn}(<arguments>) == <expected>\`, with Python literal values, inside one \`\`\`python block.`
      : `Write each test on its own line as a call \`${fn}(<arguments>)\` with Python literal values, inside one \`\`\`python block.`;
  }
  return `Write each test as one \`assert\` statement on its own line that calls \`${fn}\`, inside one \`\`\`python block.`;
}

function need<T>(value: T | undefined, what: string, template: string): T {
  if (value === undefined) throw new PromptTemplateError(`template ${template} needs ${what}`);
  return value;
}

const TEMPLATES: PromptTemplate[] = [
  {
    id: 'solve',
    version: 1,
    role: 'code',
    whiteBox: false,
    render: (f) =>
      [
        'Solve the programming problem below in Python 3.',
        interfaceLine(f),
        '',
        f.statement.trim(),
        ...(f.starterCode ? ['', 'Start from:', '```python', f.starterCode.trimEnd(), '```'] : []),
        '',
        'Answer with the complete program in one ```python block.',
      ].join('\n'),
  },
  {
    // Code-A1: the adversary sees the candidate and is paid for valid tests that it fails.
    id: 'attack-white-box',
    version: 1,
    role: 'test',
    whiteBox: true,
    render: (f) =>
      [
        'Below are a programming problem and a candidate solution that may be wrong.',
        `Write up to ${f.suiteSize} tests that a correct solution passes and that this candidate fails if it has a bug. Expected values must follow the problem statement, not the candidate.`,
        '',
        '# Problem',
        f.statement.trim(),
        '',
        '# Candidate solution',
        '```python',
        need(f.program, 'the program under test', 'attack-white-box@v1').trimEnd(),
        '```',
        '',
        testFormat(f, true),
      ].join('\n'),
  },
  {
    id: 'tests-black-box',
    version: 1,
    role: 'test',
    whiteBox: false,
    render: (f) =>
      [
        `Write up to ${f.suiteSize} tests for the programming problem below that a correct solution passes and a wrong one likely fails; include edge cases.`,
        interfaceLine(f),
        '',
        f.statement.trim(),
        '',
        testFormat(f, true),
      ].join('\n'),
  },
  {
    // ACE judges test inputs by crashes only: no expected values are asked for.
    id: 'inputs-black-box',
    version: 1,
    role: 'test',
    whiteBox: false,
    render: (f) =>
      [
        `Write up to ${f.suiteSize} valid test inputs for the programming problem below, chosen to expose bugs (edge cases, extremes).`,
        interfaceLine(f),
        '',
        f.statement.trim(),
        '',
        testFormat(f, false),
      ].join('\n'),
  },
  {
    // For a small model with a short context (gpu-bridge's byte-level toy model on CPU): the
    // statement's first paragraph and the interface, no instructions (every prompt byte costs
    // a forward pass on each sampled and trained token).
    id: 'solve-brief',
    version: 1,
    role: 'code',
    whiteBox: false,
    render: (f) => `Python 3 program; ${briefInterface(f)}.\n${firstParagraph(f.statement)}\n`,
  },
  {
    id: 'tests-brief',
    version: 1,
    role: 'test',
    whiteBox: false,
    render: (f) =>
      `Tests (${f.style === 'stdio' ? 'Input/Output blocks' : 'assert lines'}) for a Python 3 program; ${briefInterface(f)}.\n${firstParagraph(f.statement)}\n`,
  },
  {
    // Code-A1's white-box adversary in brief: the program under test follows the statement, so
    // the suites of one program share a prompt and form its GRPO group.
    id: 'tests-brief-white-box',
    version: 1,
    role: 'test',
    whiteBox: true,
    render: (f) =>
      `Tests (${f.style === 'stdio' ? 'Input/Output blocks' : 'assert lines'}) for this Python 3 program; ${briefInterface(f)}.\n${firstParagraph(f.statement)}\n\`\`\`python\n${need(f.program, 'the program under test', 'tests-brief-white-box@v1').trimEnd()}\n\`\`\`\n`,
  },
];

function briefInterface(f: PromptFields): string {
  return f.style === 'stdio' ? 'reads stdin, writes stdout' : `defines \`${f.entryPoint ?? '(unnamed)'}\``;
}

function firstParagraph(statement: string): string {
  return statement
    .trim()
    .split(/\n\s*\n/)[0]!
    .trim();
}

const byKey = new Map(TEMPLATES.map((t) => [`${t.id}@v${t.version}`, t]));

export function template(id: string, version: number): PromptTemplate {
  const t = byKey.get(`${id}@v${version}`);
  if (!t) throw new PromptTemplateError(`no prompt template ${id}@v${version} (known: ${[...byKey.keys()].join(', ')})`);
  return t;
}

/** full: the method's templates; brief: the short black-box ones, for small models. */
export type PromptSet = 'full' | 'brief';

/** The template a method uses for a role: the solver prompt for code; for tests, the white-box
 * attack when the adversary sees the program, else the black-box prompt (inputs only for ACE). */
export function templateFor(method: string, role: Role, whiteBox: boolean, prompts: PromptSet = 'full'): PromptTemplate {
  if (prompts === 'brief') {
    if (method === 'ace') throw new PromptTemplateError('the brief prompts ask for expected values: not for ACE');
    return template(role === 'code' ? 'solve-brief' : whiteBox ? 'tests-brief-white-box' : 'tests-brief', 1);
  }
  if (role === 'code') return template('solve', 1);
  if (whiteBox) return template('attack-white-box', 1);
  return method === 'ace' ? template('inputs-black-box', 1) : template('tests-black-box', 1);
}

export function renderPrompt(t: PromptTemplate, fields: PromptFields): RenderedPrompt {
  return { templateId: t.id, templateVersion: t.version, text: t.render(fields) };
}
