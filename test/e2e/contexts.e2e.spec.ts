import { describe, expect, it } from '@jest/globals';
import { Body, Controller, Injectable, Post, StreamableFile } from '@nestjs/common';
import { EventPattern, MessagePattern, Transport } from '@nestjs/microservices';
import { Query, Resolver } from '@nestjs/graphql';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { ADAPTERS, startApp } from '../support/app.js';

@Controller()
class MessagesController {
  @MessagePattern('charge')
  @Idempotent({ identity: () => 'tenant' })
  charge(data: { amount: number }) {
    return { charged: data.amount };
  }
}

@Controller()
class EventsController {
  @EventPattern('charged')
  @Idempotent({ keyFrom: 'id' as never })
  charged(data: { id: number }) {
    return data.id;
  }
}

@Controller('pay')
class RouteWithKeyFrom {
  @Post()
  @Idempotent({ keyFrom: () => 'k' })
  pay(@Body() body: object) {
    return body;
  }
}

/** A provider whose methods neither the HTTP router nor a GraphQL schema ever calls. */
@Injectable()
class PaymentsService {
  @Idempotent()
  createPayment() {
    return { id: 1 };
  }
}

/** A GraphQL query resolver: a safe operation, never deduplicated. */
@Resolver()
class PaymentsQueries {
  @Query(() => String)
  @Idempotent()
  payment() {
    return 'p';
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
  // Message handlers are deduplicated now (issue 26); what reads an HTTP request is refused on them.
  it('refuses an HTTP-only option on a @MessagePattern handler of a hybrid application at bootstrap, naming it', async () => {
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [MessagesController] })).toBe(
      '@Idempotent() on MessagesController.charge(): identity is an option of HTTP routes and GraphQL mutations only',
    );
  });

  it('refuses a keyFrom that is no function on an @EventPattern handler, and keyFrom on a route', async () => {
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [EventsController] })).toBe(
      '@Idempotent() on EventsController.charged(): keyFrom must be a function (data, context) => string, the message id',
    );
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [RouteWithKeyFrom] })).toBe(
      '@Idempotent() on RouteWithKeyFrom.pay(): keyFrom is an option of message handlers and GraphQL mutations only',
    );
  });

  it('refuses a provider method that is no GraphQL mutation: a service, a query resolver', async () => {
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], providers: [PaymentsService] })).toBe(
      '@Idempotent() on PaymentsService.createPayment(): only the route and message handlers of controllers and GraphQL mutation resolvers are deduplicated; on a provider method (a service) it would do nothing, so it is refused; remove the decorator (IdempotencyInbox.run() deduplicates any other code)',
    );
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], providers: [PaymentsQueries] })).toBe(
      '@Idempotent() on PaymentsQueries.payment(): a GraphQL Query resolver is not deduplicated (only mutations change anything)',
    );
  });

  it('refuses a route declared to return a StreamableFile, transactional or not', async () => {
    expect(await refusal(adapter, { imports: [IdempotencyModule.forRoot()], controllers: [FilesController] })).toBe(
      '@Idempotent() on FilesController.receipt(): a route declared to return a StreamableFile is never stored, so a retry would run it again; return the bytes (a Buffer or a value) instead',
    );
  });
});
