import pkg from '../../package.json' with { type: 'json' };

/** The version of this release, apart from the panel so the node agent can say it without loading the panel. */
export const VERSION: string = pkg.version;
