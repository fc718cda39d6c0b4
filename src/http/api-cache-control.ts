/** Every /api/v1 answer's Cache-Control (Forgejo's API sends the same: responses are per user and change). */
export const API_CACHE_CONTROL = 'max-age=0, private, must-revalidate, no-transform';
