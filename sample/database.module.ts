import { type DynamicModule, Module } from '@nestjs/common';
import { DATABASE_PATH, DatabaseService } from './database.service.js';

/** The sample's SQLite database, for the controllers and for the idempotency store beside them. */
@Module({})
export class DatabaseModule {
  static register(path: string): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [{ provide: DATABASE_PATH, useValue: path }, DatabaseService],
      exports: [DatabaseService],
    };
  }
}
