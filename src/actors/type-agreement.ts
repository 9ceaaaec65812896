/**
 * Compile-time agreement of a schema with a type declared elsewhere (another layer's interface
 * that the schema describes but cannot replace): `agree<Agree<z.infer<typeof S>, T>>()` compiles
 * only when each is assignable to the other, so neither changes without the other.
 */
export type Agree<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

export function agree<T extends true>(): void {}
