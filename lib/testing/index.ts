// The `nestjs-idempotency/testing` entry: what a store of your own, or your app's tests, need.
export { storeContract } from './store-contract.suite.js';
export { sampleRecord } from './store-contract.assertions.js';
export type { ContractFramework, OptionalStoreMethod, StoreContractOptions } from './store-contract.options.js';
