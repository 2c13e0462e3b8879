# The corral service image: one image for `corral api` and `corral worker` (compose.yaml). It adds the
# application to the runtime image (images/service-runtime.Dockerfile: Debian base, Node 22, production
# node_modules), which images/service-image.sh builds first; build context = the repository root,
# narrowed by .dockerignore. The CLI runs TypeScript through tsx (a runtime dependency, see bin/corral),
# so there is no compile step. Runs as the unprivileged user corral (uid 10100).
ARG RUNTIME_IMAGE=corral/service-runtime:latest
FROM ${RUNTIME_IMAGE}
ENV NODE_ENV=production LANG=C.UTF-8 CORRAL_API_HOST=0.0.0.0 CORRAL_POLICY_DIR=/app/policies CORRAL_ENVIRONMENT_DIR=/app/environments
WORKDIR /app
USER 10100:10100
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/corral-entrypoint"]
CMD ["serve"]
COPY images/service/entrypoint /usr/local/bin/corral-entrypoint
COPY package.json package-lock.json tsconfig.json /app/
COPY bin /app/bin
COPY policies /app/policies
COPY environments /app/environments
COPY examples /app/examples
COPY src /app/src
