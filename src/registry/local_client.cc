// LocalClient: the Client interface over a Registry in this process.
#include "gantry/registry/client.h"

namespace gantry::registry {

Result<ModelVersion> LocalClient::Register(const RegisterRequest& req) {
  return reg_->Register(req);
}

Result<ModelVersion> LocalClient::RegisterCheckpoint(RegisterRequest req,
                                                     const CheckpointSource& src) {
  return reg_->RegisterCheckpoint(std::move(req), src);
}

Result<std::vector<RegisteredModel>> LocalClient::ListModels() { return reg_->meta().ListModels(); }

Result<RegisteredModel> LocalClient::GetModel(std::string_view name) {
  return reg_->meta().GetModel(name);
}

Result<ModelVersion> LocalClient::Resolve(std::string_view ref) { return reg_->Resolve(ref); }

Result<std::vector<ModelVersion>> LocalClient::ListVersions(std::string_view name) {
  // As the server does before listing (an empty name there means "search").
  RETURN_IF_ERROR(ValidateModelName(name));
  return reg_->meta().ListVersions(name);
}

Result<std::vector<ModelVersion>> LocalClient::Search(const SearchQuery& query) {
  return reg_->meta().Search(query);
}

Status LocalClient::SetAlias(std::string_view name, std::string_view alias, int64_t version,
                             std::optional<int64_t> expected) {
  return reg_->SetAlias(name, alias, version, expected);
}

Status LocalClient::DeleteAlias(std::string_view name, std::string_view alias,
                                std::optional<int64_t> expected) {
  return reg_->DeleteAlias(name, alias, expected);
}

Result<std::string> LocalClient::Sign(std::string_view ref, const security::DsseSigner& signer) {
  return reg_->Sign(ref, signer);
}

Result<VerifyReport> LocalClient::Verify(std::string_view ref, bool require_signature) {
  return reg_->Verify(ref, require_signature);
}

Result<VerifyReport> LocalClient::Download(std::string_view ref, const std::string& dest,
                                           const ExportOptions& options) {
  if (dest.empty()) return InvalidArgument("download of " + std::string(ref) + ": no destination");
  return reg_->Export(ref, dest, options);
}

Result<DeleteReport> LocalClient::DeleteVersion(std::string_view name, int64_t version) {
  return reg_->DeleteVersion(name, version);
}

Result<DeleteReport> LocalClient::DeleteModel(std::string_view name) {
  return reg_->DeleteModel(name);
}

Result<std::vector<TrustedKey>> LocalClient::TrustedKeys() { return reg_->meta().TrustedKeys(); }

Result<TrustedKey> LocalClient::TrustKey(std::string_view public_pem, std::string_view comment) {
  return reg_->TrustKey(public_pem, comment);
}

Status LocalClient::UntrustKey(std::string_view keyid) { return reg_->UntrustKey(keyid); }

Result<bool> LocalClient::SignaturesRequired() { return reg_->SignaturesRequired(); }

Status LocalClient::SetSignaturesRequired(bool on) { return reg_->SetSignaturesRequired(on); }

}  // namespace gantry::registry
