/**
 * The API's types, generated once from the served OpenAPI document for the TypeScript SDK
 * (sdk/tools/generate.ts, `npm run gen:sdk`): the console and the tests read the same file.
 */
export type { components, paths } from '../../sdk/typescript/src/schema.ts';
