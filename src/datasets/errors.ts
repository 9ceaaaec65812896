/** A dataset that cannot be read as asked: a missing file, an unknown format, a malformed
 * document. The message names the file and, where there is one, the line or row. */
export class DatasetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DatasetError';
  }
}
