import { describe, expect, it } from '@jest/globals';
import { Controller, Injectable, Post, StreamableFile } from '@nestjs/common';
import { EventPattern, MessagePattern, Transport } from '@nestjs/microservices';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { ADAPTERS, startApp } from '../support/app.js';

@Controller()
class MessagesController {
  @MessagePattern('charge')
  @Idempotent()
  charge(data: { amount: number }) {
    return { charged: data.amount };
  }
}

@Controller()
class EventsController {
  @EventPattern('charged')
  @Idempotent()
  charged(data: { id: number }) {
    return data.id;
  }
}

/** What a GraphQL resolver is to Nest: a provider whose methods the HTTP router never calls. */
@Injectable()
class PaymentsResolver {
  @Idempotent()
  createPayment() {
    return { id: 1 };
  }
}

@Controller('files')
class FilesController {
  @Post()
  @Idempotent()
  receipt(): StreamableFile {
    return new StreamableFile(Buffer.from('receipt'));
  }
}

const refusal = async (adapter: (typeof ADAPTERS)[number], metadata: Parameters<typeof startApp>[1]) => {
  try {
    const app = await startApp(adapter, metadata, {
      configure: (a) => a.connectMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port: 0 } }),
    });
    await app.close();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('the application started');
};

// H23 (issue 22 item 9): @Idempotent() on a message handler of a hybrid app, or on a resolver,
// started without a word and deduplicated nothing. H32 (item 18): a declared StreamableFile booted.
describe.each(ADAPTERS)('@Idempotent() where it cannot deduplicate, on %s', (adapter) => {
  it('refuses a @MessagePattern handler of a hybrid application at bootstrap, naming it', async () => {
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [MessagesController] })).toBe(
      '@Idempotent() on MessagesController.charge(): message handlers (@MessagePattern, @EventPattern) are not supported yet: only HTTP route handlers are deduplicated; remove the decorator and call IdempotencyInbox.run() in the handler',
    );
  });

  it('refuses an @EventPattern handler', async () => {
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [EventsController] })).toContain(
      '@Idempotent() on EventsController.charged(): message handlers',
    );
  });

  it('refuses a provider method (a GraphQL resolver)', async () => {
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], providers: [PaymentsResolver] })).toBe(
      '@Idempotent() on PaymentsResolver.createPayment(): only HTTP route handlers of controllers are deduplicated; on a provider method (a GraphQL resolver, a service) it would do nothing, so it is refused; remove the decorator (IdempotencyInbox.run() deduplicates any other code)',
    );
  });

  it('refuses a route declared to return a StreamableFile, transactional or not', async () => {
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [FilesController] })).toBe(
      '@Idempotent() on FilesController.receipt(): a route declared to return a StreamableFile is never stored, so a retry would run it again; return the bytes (a Buffer or a value) instead',
    );
  });
});
