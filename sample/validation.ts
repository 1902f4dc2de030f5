import { UnprocessableEntityException } from '@nestjs/common';

export const MAX_AMOUNT = 100_000_000; // minor units: 1 000 000.00
export const MAX_QUANTITY = 1000;
export const MAX_ITEM_LENGTH = 200;

export interface CreatePayment {
  amount: number;
  currency: string;
}

export interface CreateOrder {
  item: string;
  quantity: number;
}

function reject(error: string): never {
  throw new UnprocessableEntityException({ error });
}

function object(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) reject('body must be a JSON object');
  return body as Record<string, unknown>;
}

/** A JSON integer in range: strings, floats, null and integers past 2^53 (which JSON.parse rounds) are refused. */
function integer(value: unknown, name: string, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) reject(`${name} must be an integer`);
  if (value < 1 || value > max) reject(`${name} must be between 1 and ${max}`);
  return value;
}

export function parsePayment(body: unknown): CreatePayment {
  const b = object(body);
  const amount = integer(b.amount, 'amount', MAX_AMOUNT);
  if (typeof b.currency !== 'string' || !/^[A-Z]{3}$/.test(b.currency)) reject('currency must be a three-letter ISO code');
  return { amount, currency: b.currency };
}

export function parseOrder(body: unknown): CreateOrder {
  const b = object(body);
  if (typeof b.item !== 'string' || b.item.length < 1 || b.item.length > MAX_ITEM_LENGTH) {
    reject(`item must be a string of 1 to ${MAX_ITEM_LENGTH} characters`);
  }
  return { item: b.item, quantity: integer(b.quantity, 'quantity', MAX_QUANTITY) };
}
