// heed/seq2seq/corpus.hpp — a small English–French corpus that heed generates itself,
// so that the translation demos and tests run without downloading Tatoeba's fra.txt.
//
//   auto data = heed::load_data_nmt_text(heed::builtin_fra_eng(), /*batch_size=*/64, /*num_steps=*/10);
//
// builtin_fra_eng() returns about 440 pairs in fra.txt's format ("He's calm.\tIl est
// calme.\n"; French '!' and '?' after a narrow no-break space, as Tatoeba writes them),
// made by a small grammar: d2l's short classics (Go. → Va !), être with adjectives
// agreeing in gender and number (She's happy. → Elle est heureuse.), its negation
// (I'm not tired. → Je ne suis pas fatigué.) and questions (Are you tired? → Es-tu
// fatigué ?), passé composé with avoir (I lost. → J'ai perdu.) and with être, agreeing
// (She left. → Elle est partie.), and places (I'm home. → Je suis chez moi.). English
// "I", "you", "we" and "they" have no gender, so a sentence whose French depends on it
// appears with each French form, as in Tatoeba. Every sentence is at most 8 tokens
// after preprocess_nmt, so num_steps = 10 holds it with <eos>. The output depends on
// nothing but this file.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "heed/detail/inline.hpp"

namespace heed {

/// The built-in English–French corpus in fra.txt's format (see the top of this file).
std::string builtin_fra_eng();

#if HEED_NON_TEMPLATE_DEFINITIONS

namespace detail {
namespace corpus {

// Adjective and participle forms: masculine singular, feminine singular, masculine
// plural, feminine plural.
enum Form { kMasc = 0, kFem = 1, kMascPlural = 2, kFemPlural = 3 };

struct Subject {
  const char* en;       // I lost.
  const char* en_be;    // I'm tired.
  const char* en_be_q;  // Am I tired?
  const char* fr;       // je
  const char* etre;     // suis
  const char* avoir;    // ai
  const char* fr_q;     // suis-je (être inverted)
  const char* home;     // chez moi
  Form form;
};

// Each English subject with every French reading it has.
inline const std::vector<Subject>& subjects() {
  static const std::vector<Subject> list = {
      {"I", "I'm", "Am I", "je", "suis", "ai", "suis-je", "chez moi", kMasc},
      {"I", "I'm", "Am I", "je", "suis", "ai", "suis-je", "chez moi", kFem},
      {"You", "You're", "Are you", "tu", "es", "as", "es-tu", "chez toi", kMasc},
      {"You", "You're", "Are you", "tu", "es", "as", "es-tu", "chez toi", kFem},
      {"He", "He's", "Is he", "il", "est", "a", "est-il", "chez lui", kMasc},
      {"She", "She's", "Is she", "elle", "est", "a", "est-elle", "chez elle", kFem},
      {"We", "We're", "Are we", "nous", "sommes", "avons", "sommes-nous", "chez nous", kMascPlural},
      {"We", "We're", "Are we", "nous", "sommes", "avons", "sommes-nous", "chez nous", kFemPlural},
      {"They", "They're", "Are they", "ils", "sont", "ont", "sont-ils", "chez eux", kMascPlural},
      {"They", "They're", "Are they", "elles", "sont", "ont", "sont-elles", "chez elles", kFemPlural},
  };
  return list;
}

struct Adjective {
  const char* en;
  const char* fr[4];  // by Form
};

inline const std::vector<Adjective>& adjectives() {
  static const std::vector<Adjective> list = {
      {"calm", {"calme", "calme", "calmes", "calmes"}},
      {"happy", {"heureux", "heureuse", "heureux", "heureuses"}},
      {"tired", {"fatigué", "fatiguée", "fatigués", "fatiguées"}},
      {"sad", {"triste", "triste", "tristes", "tristes"}},
      {"ready", {"prêt", "prête", "prêts", "prêtes"}},
      {"sick", {"malade", "malade", "malades", "malades"}},
      {"busy", {"occupé", "occupée", "occupés", "occupées"}},
      {"late", {"en retard", "en retard", "en retard", "en retard"}},
      {"young", {"jeune", "jeune", "jeunes", "jeunes"}},
      {"rich", {"riche", "riche", "riches", "riches"}},
      {"angry", {"fâché", "fâchée", "fâchés", "fâchées"}},
      {"shy", {"timide", "timide", "timides", "timides"}},
  };
  return list;
}

/// "je" + "ai" → "j'ai", "ne" + "est" → "n'est", "je" + "suis" → "je suis", "il" + "a" → "il a".
inline std::string elide(const std::string& word, const std::string& next) {
  const bool elides = word == "je" || word == "ne";
  const bool vowel = !next.empty() && std::string("aeiouh").find(next[0]) != std::string::npos;
  return elides && vowel ? word.substr(0, word.size() - 1) + "'" + next : word + " " + next;
}

/// Upper-cases the first letter (ASCII; the generated sentences start with one).
inline std::string capitalize(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

/// Collects "English\tFrench\n" lines, each distinct pair once, in order.
class Lines {
 public:
  /// english ends with its punctuation; french gets `mark` ('.', '!' or '?'), after a
  /// narrow no-break space for '!' and '?' as in Tatoeba's French.
  void add(const std::string& english, const std::string& french, char mark) {
    std::string line = capitalize(english) + "\t" + capitalize(french);
    if (mark != '.') line += "\xE2\x80\xAF";  // U+202F
    line += mark;
    if (seen_.insert(line).second) text_ += line + "\n";
  }
  std::string text() const { return text_; }

 private:
  std::set<std::string> seen_;
  std::string text_;
};

}  // namespace corpus
}  // namespace detail

HEED_INLINE std::string builtin_fra_eng() {
  using namespace detail::corpus;
  Lines lines;

  // d2l's first lines of fra.txt, and a few more of the same kind.
  const std::vector<std::pair<const char*, std::pair<const char*, char>>> classics = {
      {"Go.", {"Va", '!'}},
      {"Hi.", {"Salut", '!'}},
      {"Run!", {"Cours", '!'}},
      {"Run!", {"Courez", '!'}},
      {"Who?", {"Qui", '?'}},
      {"Wow!", {"Ça alors", '!'}},
      {"Fire!", {"Au feu", '!'}},
      {"Help!", {"À l'aide", '!'}},
      {"Jump.", {"Saute", '.'}},
      {"Stop!", {"Ça suffit", '!'}},
      {"Stop!", {"Arrête-toi", '!'}},
      {"Wait!", {"Attends", '!'}},
      {"Wait!", {"Attendez", '!'}},
      {"Hello!", {"Bonjour", '!'}},
      {"I see.", {"Je comprends", '.'}},
      {"I try.", {"J'essaye", '.'}},
      {"Thanks!", {"Merci", '!'}},
      {"Get up.", {"Lève-toi", '.'}},
      {"Go away!", {"Va-t'en", '!'}},
      {"Come in.", {"Entre", '.'}},
      {"Hurry!", {"Dépêche-toi", '!'}},
      {"Cheers!", {"Santé", '!'}},
      {"Go home.", {"Va chez toi", '.'}},
      {"It's me.", {"C'est moi", '.'}},
      {"It's him.", {"C'est lui", '.'}},
      {"Come with me.", {"Viens avec moi", '.'}},
      {"Got it?", {"Compris", '?'}},
      {"Relax.", {"Détends-toi", '.'}},
  };
  for (const auto& [english, french] : classics) lines.add(english, french.first, french.second);

  // Passé composé with avoir: the participle does not agree.
  const std::vector<std::pair<const char*, const char*>> avoir_verbs = {
      {"lost", "perdu"},     {"won", "gagné"},  {"ate", "mangé"},    {"slept", "dormi"},
      {"waited", "attendu"}, {"lied", "menti"}, {"tried", "essayé"}, {"paid", "payé"},
  };
  for (const auto& [english, participle] : avoir_verbs)
    for (const Subject& s : subjects())
      lines.add(std::string(s.en) + " " + english + ".", elide(s.fr, s.avoir) + " " + participle, '.');

  // être with an adjective: affirmative, negative, question.
  for (const Adjective& a : adjectives())
    for (const Subject& s : subjects())
      lines.add(std::string(s.en_be) + " " + a.en + ".", std::string(s.fr) + " " + s.etre + " " + a.fr[s.form], '.');
  for (const Adjective& a : adjectives())
    for (const Subject& s : subjects())
      lines.add(std::string(s.en_be) + " not " + a.en + ".",
                std::string(s.fr) + " " + elide("ne", s.etre) + " pas " + a.fr[s.form], '.');
  for (const Adjective& a : adjectives())
    for (const Subject& s : subjects())
      lines.add(std::string(s.en_be_q) + " " + a.en + "?", std::string(s.fr_q) + " " + a.fr[s.form], '?');

  // Passé composé with être: the participle agrees with the subject.
  const std::vector<std::pair<const char*, const char*>> etre_verbs = {
      {"left", "parti"}, {"came", "venu"}, {"fell", "tombé"}};
  static const char* const kAgreement[4] = {"", "e", "s", "es"};
  for (const auto& [english, participle] : etre_verbs)
    for (const Subject& s : subjects())
      lines.add(std::string(s.en) + " " + english + ".",
                std::string(s.fr) + " " + s.etre + " " + participle + kAgreement[s.form], '.');

  // Places.
  for (const Subject& s : subjects()) {
    const std::string be = std::string(s.fr) + " " + s.etre + " ";
    lines.add(std::string(s.en_be) + " home.", be + s.home, '.');
    lines.add(std::string(s.en_be) + " here.", be + "ici", '.');
    lines.add(std::string(s.en_be) + " outside.", be + "dehors", '.');
    lines.add(std::string(s.en_be) + " at work.", be + "au travail", '.');
  }
  return lines.text();
}

#endif  // HEED_NON_TEMPLATE_DEFINITIONS

}  // namespace heed
