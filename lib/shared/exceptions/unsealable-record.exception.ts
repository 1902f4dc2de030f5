/** A sealed record that cannot be opened here; its message names the key id, never a byte of the record. */
export class UnsealableRecord extends Error {}
