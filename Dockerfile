# batchsched: `docker build -t batchsched:0.1.0 .` (deploy/deployment.yaml runs `batchsched run`)
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
# Non-root, as the Deployment's securityContext requires.
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["batchsched"]
CMD ["run"]
