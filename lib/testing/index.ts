// The `nestjs-idempotency/testing` entry: what a store of your own, or your app's tests, need.
export { storeContract, sampleRecord } from './store-contract.suite.js';
export type { ContractFramework, OptionalStoreMethod, StoreContractOptions } from './store-contract.suite.js';
