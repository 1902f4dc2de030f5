import { describe, expect, it } from '@jest/globals';
import { sqlState } from '../../lib/core/transactions/sql-states.js';

describe('sqlState', () => {
  it("reads node-postgres's code and TypeORM's driverError.code; anything else is no SQLSTATE", () => {
    expect(sqlState({ code: '40001' })).toBe('40001');
    expect(sqlState({ driverError: { code: '25P02' } })).toBe('25P02');
    expect(sqlState({ code: 'ECONNRESET', driverError: { code: '40001' } })).toBe('ECONNRESET');
    for (const err of [undefined, null, 'boom', {}, { code: 40001 }, { driverError: { code: null } }]) {
      expect(sqlState(err)).toBe('');
    }
  });
});
