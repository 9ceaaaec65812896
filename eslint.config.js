// Lint rules of the project (`npm run lint`): typed rules that catch promises nobody awaits or
// handles (an effect or an append whose failure would go unseen), and imports that resolve.
import tseslint from 'typescript-eslint';
import promise from 'eslint-plugin-promise';
import importX from 'eslint-plugin-import-x';

export default tseslint.config(
  { ignores: ['node_modules/**', 'runs/**', 'gpu-bridge/**', 'docs/**', '**/*.js', '**/*.cjs', '**/*.mjs'] },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'vitest.config.ts'],
    extends: [tseslint.configs.base],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { promise, 'import-x': importX },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/await-thenable': 'error',
      'promise/no-multiple-resolved': 'error',
      'import-x/no-duplicates': 'error',
      'import-x/no-self-import': 'error',
      'import-x/first': 'error',
    },
  },
);
