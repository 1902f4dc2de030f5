import { createHash } from 'node:crypto';

/**
 * Names for the store's statements, so that node-postgres prepares each once per connection. A name
 * is derived from the text itself: node-postgres refuses one name for two texts on a connection, and
 * stores of other tables (or other releases) may share the application's pool. A store runs a fixed
 * set of texts, so the map stays small.
 */
export class StatementNames {
  private readonly names = new Map<string, string>();

  of(text: string): string {
    let name = this.names.get(text);
    if (name === undefined) {
      name = `idem_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
      this.names.set(text, name);
    }
    return name;
  }
}
