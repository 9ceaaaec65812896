/** The backend's settings are part of the run config (validated there); re-exported for callers of this module. */
export { OpenAIPolicyOptions, RetryOptions, type OpenAIPolicyOptionsInput } from '../../config/openai.js';
