/** The lease ran out (a fenced statement matched no row, or its deadline passed): the key may be another's. */
export class LeaseLost extends Error {}
