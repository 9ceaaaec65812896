import { z } from 'zod';

/** The two policies of a run: the code policy (Solver) and the test policy (Adversary). */
export const Role = z.enum(['code', 'test']);
export type Role = z.infer<typeof Role>;
