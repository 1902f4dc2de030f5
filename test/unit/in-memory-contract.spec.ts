import { InMemoryCache } from '../../lib/index.js';
import { storeContract } from '../support/store-contract.js';

storeContract('InMemoryCache', async () => new InMemoryCache());
