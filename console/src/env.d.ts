/** Stylesheets imported by the code are bundled by Vite; the import has no value. */
declare module '*.css';
