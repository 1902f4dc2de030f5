import { Injectable, type OnModuleInit, Optional } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { type FastifyInstanceLike, installReplyRecorder } from './reply.recorder.js';

/**
 * Adds the reply recorder's `onSend` hook to a Fastify application while it initialises: after its
 * routes and the plugins registered before `init()`, before it is ready (a hook cannot be added then).
 */
@Injectable()
export class ReplyRecorderInstaller implements OnModuleInit {
  constructor(@Optional() private readonly host?: HttpAdapterHost) {}

  onModuleInit(): void {
    const adapter = this.host?.httpAdapter;
    if (adapter?.getType() === 'fastify') installReplyRecorder(adapter.getInstance<FastifyInstanceLike>());
  }
}
