# syncauth's image: the CLI on Node 20, production dependencies only, run as the unprivileged `node` user
# (uid 1000). Build it from the repository root:
#
#   docker build -t syncauth:0.1.0 .
#   docker run --rm -e SYNCAUTH_STORE=env -e SYNCAUTH_APP_KEY -e SYNCAUTH_APP_SECRET -e SYNCAUTH_REFRESH_TOKEN \
#     -e SYNCAUTH_API_KEY -e SYNCAUTH_BASE_URL=https://platform.example.com -e SYNCAUTH_REMOTE_URL=dropbox://data \
#     syncauth:0.1.0 daemon --once
#
# renews the grant's access token and puts it in the `dropbox-data` connector (the one `syncauth setup` makes
# for dropbox://data); the secrets come from the environment of `docker run`, never from its arguments. With
# nothing to reconcile and nowhere to publish (no base URL and API key, no token file), `daemon --once` exits 2
# naming what is missing rather than renew a token and throw it away.
#
# The entrypoint is the CLI, so arguments name the command (`daemon` when none is given). deploy/README.md
# has the Kubernetes manifests that use it.

FROM node:20-bookworm-slim AS build
WORKDIR /src
# No browser download for the end-to-end tests' driver, which the build does not use.
ENV PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
COPY package.json npm-shrinkwrap.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The build bundles the CLI (scripts/bundle-cli.mjs) after compiling it.
COPY scripts ./scripts
RUN npm run build

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json npm-shrinkwrap.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /src/dist ./dist
# The health server's usual port (`daemon --listen 0.0.0.0:9464`); it serves health and metrics, never a token.
EXPOSE 9464
USER node
ENTRYPOINT ["node", "/app/dist/cli/main.js"]
CMD ["daemon"]
