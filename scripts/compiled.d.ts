// Types of compiled.js, for the tests and benchmarks that apply its rule.
export declare const BUILD_INPUTS: readonly string[];
export declare const DIST: string;
export declare const STAMP: string;
export declare function inputFiles(root: string): { file: string; mtimeMs: number }[];
export declare function staleness(root: string): string | null;
