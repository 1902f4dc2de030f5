import { Body, Controller, Get, Post, Req, UseGuards } from '@nestjs/common';
import { Idempotent, IdempotencyKey } from '../lib/index.js';
import { AuthGuard, type Caller } from './auth.guard.js';
import { DatabaseService } from './database.service.js';
import { parseOrder } from './validation.js';

@Controller('orders')
@UseGuards(AuthGuard)
export class OrdersController {
  constructor(private readonly db: DatabaseService) {}

  @Post()
  @Idempotent()
  create(@Body() body: unknown, @Req() req: { user: Caller }, @IdempotencyKey() key: string) {
    const { item, quantity } = parseOrder(body);
    const row = this.db.addOrder(req.user.accountId, item, quantity, key);
    return { id: `ord_${row.id}`, item: row.item, quantity: row.quantity, createdAt: row.created_at };
  }

  @Get()
  list(@Req() req: { user: Caller }) {
    return this.db.orders(req.user.accountId).map((r) => ({ id: `ord_${r.id}`, item: r.item, quantity: r.quantity }));
  }
}
