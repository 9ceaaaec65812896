/** The catalog cache shared by the test files of one `vitest run` (see global-setup.ts). */
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    catalogCache: string;
  }
}

/** Where runs of the tests cache the demo catalogs they build. Runs that check what the cache
 * holds keep a cache of their own. */
export const catalogCache = (): string => inject('catalogCache');
