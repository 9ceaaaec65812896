/** Names on the worker board and task queues, shared by workers and `status`. */
export const leaseNameOf = (role: string): string => `role-${role}`;
/** The task queue of the programs of execution requests. */
export const PROGRAM_QUEUE = 'programs';
