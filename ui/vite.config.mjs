// Builds the web UI into dist/ui/ (served read-only by `berth daemon`). No framework plugin:
// esbuild compiles the JSX for Preact; everything is bundled, nothing is fetched at run time.
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));

export default {
  root: here,
  base: "./",
  logLevel: "warn",
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: fileURLToPath(new URL("../dist/ui", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    assetsInlineLimit: 0,
  },
};
