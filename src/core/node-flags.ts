/**
 * The V8 flag every crucible process starts with (the `crucible` command's first line, the npm
 * scripts, the worker processes a run starts): a young generation of up to 128 MB a semi-space
 * instead of 16. The loop makes many objects that live for one effect; with the default, scavenges
 * copy them again and again, and collection was a fifth of the loop's CPU. `bench scale --fraction
 * 0.02 --problems 64`, one run each in turn: 76.0-85.8 us of CPU per result by default (three
 * runs), 64.3 and 69.8 at 128 MB (RSS +60 to +80 MB), 71.8 and 75.1 at 64 MB, 79.5 at 256 MB
 * (RSS +385 MB). V8 sizes the young generation when the process starts, so it has to be a flag
 * on node's command line (`v8.setFlagsFromString` later changes nothing).
 */
export const YOUNG_GENERATION_FLAG = '--max-semi-space-size=128';
