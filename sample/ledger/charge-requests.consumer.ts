import { Controller, UseInterceptors } from '@nestjs/common';
import { Ctx, EventPattern, Payload, type RmqContext } from '@nestjs/microservices';
import { ClsInterceptor } from 'nestjs-cls';
import { Idempotent } from '../../lib/index.js';
import { parsePayment } from '../validation.js';
import { ChargesService } from './charges.service.js';

/** The RabbitMQ queue the consumer reads (RABBITMQ_URL): `charge.requested` events, one per charge. */
export const CHARGE_REQUESTS_QUEUE = 'ledger.charge-requests';

/**
 * Charges exactly once per message id however often RabbitMQ delivers the message: the charge and
 * the inbox record commit in one transaction, and the module acks the delivery after that commit.
 * A consumer that dies before the ack gets the message redelivered (here or to another consumer),
 * and the record committed with the charge makes the redelivery a skip.
 */
@Controller()
// A message has no HTTP middleware to open the CLS context that @Transactional() services join.
@UseInterceptors(ClsInterceptor)
export class ChargeRequestsConsumer {
  constructor(private readonly charges: ChargesService) {}

  @EventPattern('charge.requested')
  @Idempotent({ transactional: true, ack: true })
  async requested(@Payload() data: { accountId: string; amount: number; currency: string }, @Ctx() ctx: unknown) {
    // Nest 12 types an event handler's further parameters as unknown.
    const { messageId } = ((ctx as RmqContext).getMessage() as { properties: { messageId: string } }).properties;
    await this.charges.create(data.accountId, parsePayment(data), messageId);
  }
}
